"""Property-based API testing from the OpenAPI schema (schemathesis): no server errors, responses
match the schema. A bounded number of examples per operation keeps it quick.

The operations are driven by Hypothesis directly (schemathesis' pytest plugin predates pytest 9).
"""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from api.main import create_app
from api.settings import Settings

EXAMPLES_PER_OPERATION = 12


def test_no_server_errors_and_responses_match_the_schema(tmp_path: Path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'perfmodel.sqlite3'}", api_token="tok"))
    app.state.perfmodel.store.migrate()
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:

        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
                  database=None)
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            response = case.call(headers={"Authorization": "Bearer tok"})
            case.validate_response(response, checks=(not_a_server_error, response_schema_conformance,
                                                      status_code_conformance))

        check()
