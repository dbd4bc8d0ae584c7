"""Files written and read safely: atomic writes (``atomic``), NumPy files checked before they
are trusted (``npfiles``), cross-process locks (``locks``) and the checksums a committed folder
is verified against (``integrity``)."""
