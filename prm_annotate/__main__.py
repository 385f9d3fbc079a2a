from prm_annotate.cli import main

main()
