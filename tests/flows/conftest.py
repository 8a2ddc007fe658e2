from tests.flows.test_sharding import fakes  # noqa: F401  (shared fixture)
