"""The markers around context dualtrace injects into an agent.

Recall wraps injected memories in them; the ingestion redactor strips everything
between them, so memories shown to the agent are never encoded again. A module of
its own so the prompt hook does not import the redactor to learn two strings.
"""

INJECT_OPEN = "<dualtrace-memory>"
INJECT_CLOSE = "</dualtrace-memory>"
