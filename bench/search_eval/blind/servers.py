"""The published MCP servers whose tool lists make up the blind evaluation catalog.

Each entry names the registry package, the command it installs and the
placeholder settings it needs to start and list its tools without a backend.
``{tmp}`` in an argument or a setting is a scratch folder made for the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BlindServer:
    """One server to capture: a label, its registry package, how it is started."""

    label: str
    registry: str  # "pypi" (own venv under --venv-root) or "npm" (bin under --npm-dir)
    package: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    pin: str = ""  # a version to install instead of the newest, when the newest cannot list offline


_AWS = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "placeholder", "AWS_SECRET_ACCESS_KEY": "placeholder"}

SERVERS: tuple[BlindServer, ...] = (
    # --- PyPI ---
    BlindServer(
        "atlassian",
        "pypi",
        "mcp-atlassian",
        "mcp-atlassian",
        env={
            "JIRA_URL": "https://placeholder.atlassian.net",
            "JIRA_USERNAME": "user@example.com",
            "JIRA_API_TOKEN": "placeholder",
            "CONFLUENCE_URL": "https://placeholder.atlassian.net/wiki",
            "CONFLUENCE_USERNAME": "user@example.com",
            "CONFLUENCE_API_TOKEN": "placeholder",
        },
    ),
    BlindServer(
        "serena",
        "pypi",
        "serena-agent",
        "serena",
        (
            "start-mcp-server",
            "--context=desktop-app",
            "--agent-interface=tools",
            "--enable-web-dashboard=false",
            "--open-web-dashboard=false",
            "--enable-gui-log-window=false",
        ),
    ),
    BlindServer("excel", "pypi", "excel-mcp-server", "excel-mcp-server", ("stdio",)),
    BlindServer("word", "pypi", "office-word-mcp-server", "word_mcp_server"),
    BlindServer("redis", "pypi", "redis-mcp-server", "redis-mcp-server", ("--url", "redis://127.0.0.1:1/0")),
    BlindServer("duckduckgo", "pypi", "duckduckgo-mcp-server", "duckduckgo-mcp-server"),
    BlindServer("arxiv", "pypi", "arxiv-mcp-server", "arxiv-mcp-server", ("--storage-path", "{tmp}")),
    BlindServer("chroma", "pypi", "chroma-mcp", "chroma-mcp", ("--client-type", "ephemeral")),
    BlindServer(
        "clickhouse",
        "pypi",
        "mcp-clickhouse",
        "mcp-clickhouse",
        env={
            "CLICKHOUSE_HOST": "127.0.0.1",
            "CLICKHOUSE_PORT": "1",
            "CLICKHOUSE_USER": "u",
            "CLICKHOUSE_PASSWORD": "p",
        },
    ),
    BlindServer(
        "motherduck",
        "pypi",
        "mcp-server-motherduck",
        "mcp-server-motherduck",
        ("--db-path", ":memory:", "--read-write"),
    ),
    BlindServer(
        "neo4j",
        "pypi",
        "mcp-neo4j-cypher",
        "mcp-neo4j-cypher",
        env={"NEO4J_URI": "bolt://127.0.0.1:1", "NEO4J_USERNAME": "neo4j", "NEO4J_PASSWORD": "placeholder"},
    ),
    BlindServer(
        "aws-docs",
        "pypi",
        "awslabs.aws-documentation-mcp-server",
        "awslabs.aws-documentation-mcp-server",
        env={"FASTMCP_LOG_LEVEL": "ERROR"},
    ),
    BlindServer(
        "aws-eks", "pypi", "awslabs.eks-mcp-server", "awslabs.eks-mcp-server", ("--allow-write",), env=dict(_AWS)
    ),
    BlindServer("aws-ecs", "pypi", "awslabs.ecs-mcp-server", "ecs-mcp-server", env=dict(_AWS)),
    BlindServer(
        "aws-cloudwatch", "pypi", "awslabs.cloudwatch-mcp-server", "awslabs.cloudwatch-mcp-server", env=dict(_AWS)
    ),
    BlindServer("aws-dynamodb", "pypi", "awslabs.dynamodb-mcp-server", "awslabs.dynamodb-mcp-server", env=dict(_AWS)),
    BlindServer(
        "google-workspace",
        "pypi",
        "workspace-mcp",
        "workspace-mcp",
        ("--transport", "stdio"),
        env={"GOOGLE_OAUTH_CLIENT_ID": "placeholder", "GOOGLE_OAUTH_CLIENT_SECRET": "placeholder"},
    ),
    # --- npm ---
    BlindServer(
        # 0.3 forwards every request to Stripe's hosted server; 0.2 serves its tools itself.
        "stripe",
        "npm",
        "@stripe/mcp",
        "mcp",
        ("--tools=all", "--api-key=sk_test_placeholder"),
        pin="0.2.5",
    ),
    BlindServer("sentry", "npm", "@sentry/mcp-server", "sentry-mcp", ("--access-token=placeholder",)),
    BlindServer("exa", "npm", "exa-mcp-server", "exa-mcp-server", env={"EXA_API_KEY": "placeholder"}),
    BlindServer("shopify-dev", "npm", "@shopify/dev-mcp", "shopify-dev-mcp"),
    BlindServer(
        "lara",
        "npm",
        "@translated/lara-mcp",
        "lara-mcp",
        env={"LARA_ACCESS_KEY_ID": "x", "LARA_ACCESS_KEY_SECRET": "x"},
    ),
    BlindServer(
        "elasticsearch",
        "npm",
        "@elastic/mcp-server-elasticsearch",
        "mcp-server-elasticsearch",
        env={"ES_URL": "http://127.0.0.1:1", "ES_API_KEY": "placeholder"},
    ),
    BlindServer("neon", "npm", "@neondatabase/mcp-server-neon", "mcp-server-neon", ("start", "placeholder")),
    BlindServer("desktop-commander", "npm", "@wonderwhy-er/desktop-commander", "desktop-commander"),
    BlindServer("launchdarkly", "npm", "@launchdarkly/mcp-server", "mcp", ("start", "--api-key", "api-placeholder")),
    BlindServer("mapbox", "npm", "@mapbox/mcp-server", "mcp-server", env={"MAPBOX_ACCESS_TOKEN": "pk.placeholder"}),
    BlindServer("airtable", "npm", "airtable-mcp-server", "airtable-mcp-server", env={"AIRTABLE_API_KEY": "pat.x"}),
    BlindServer("pinecone", "npm", "@pinecone-database/mcp", "pinecone-mcp", env={"PINECONE_API_KEY": "placeholder"}),
    BlindServer("netlify", "npm", "@netlify/mcp", "netlify-mcp"),
    BlindServer("postman", "npm", "@postman/postman-mcp-server", "postman-mcp-server", env={"POSTMAN_API_KEY": "x"}),
    BlindServer(
        "figma", "npm", "figma-developer-mcp", "figma-developer-mcp", ("--stdio",), env={"FIGMA_API_KEY": "placeholder"}
    ),
    BlindServer(
        "browserbase",
        "npm",
        "@browserbasehq/mcp-server-browserbase",
        "mcp-server-browserbase",
        env={"BROWSERBASE_API_KEY": "placeholder", "BROWSERBASE_PROJECT_ID": "placeholder", "GEMINI_API_KEY": "x"},
    ),
)
