"""REST service (FastAPI). Filled in by the service issue."""
