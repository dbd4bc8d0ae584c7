from privaudit.cli import main

main()
