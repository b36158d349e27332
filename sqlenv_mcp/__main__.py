import sys

from sqlenv_mcp.cli import main

sys.exit(main())
