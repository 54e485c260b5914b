from gates.judged.cli import main

raise SystemExit(main())
