"""What every layer shares: the run configs and their hashes (``config``), the defaults
(``defaults``), seeds (``seeding``), the provenance of a result (``provenance``), numbers in
words (``formatting``), timings (``timing``) and the audit's progress hooks (``hooks``)."""
