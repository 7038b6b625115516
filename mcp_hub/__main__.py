"""``python -m mcp_hub`` runs the CLI."""

import sys

from mcp_hub.cli.main import main

sys.exit(main())
