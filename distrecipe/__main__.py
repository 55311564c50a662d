from distrecipe.cli import main

raise SystemExit(main())
