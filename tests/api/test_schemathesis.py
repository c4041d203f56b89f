"""Property-based API testing from the OpenAPI schema (schemathesis): no server errors, responses
match the schema, on SQLite and PostgreSQL.

Bounded: ``EXAMPLES_PER_OPERATION`` examples per operation, no shrinking phase (a failure is reported as
found), and a per-example deadline that only catches a hung request (an example past it is a bug, e.g. a fit
run inside a request), never a speed check. The app's lifespan runs around it, so the job pool that POST
/calibrations starts is stopped and the store's engine disposed at the end (db_urls checks no connection is
left open). The operations are driven by Hypothesis directly (schemathesis' pytest plugin predates pytest 9).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from api.main import create_app
from api.settings import Settings

EXAMPLES_PER_OPERATION = 12
HANG_DEADLINE = timedelta(seconds=60)  # per example; a hang guard only


def test_no_server_errors_and_responses_match_the_schema(database_url: str) -> None:
    app = create_app(Settings(database_url=database_url, api_token="tok"))
    with TestClient(app):  # lifespan: migrate now; stop the job pool and dispose the store on exit
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
        assert len(operations) >= 10
        for operation in operations:

            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=HANG_DEADLINE, database=None,
                      phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy())
            def check(case: schemathesis.Case[Any]) -> None:
                response = case.call(headers={"Authorization": "Bearer tok"})
                case.validate_response(response, checks=[not_a_server_error, response_schema_conformance,
                                                         status_code_conformance])

            check()
