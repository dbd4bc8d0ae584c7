from privaudit.cli import entry

entry()
