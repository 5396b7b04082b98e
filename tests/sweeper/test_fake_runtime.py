"""The fake runtime's own flag parsing: a fake that misreads its argv fails sweeps for the fake's
reasons, not the product's."""

from tests.sweeper.fake_runtime import parse_flags


def test_a_launch_id_that_looks_like_a_number_is_echoed_as_passed() -> None:
    # token_hex(8) can be all digits around one "e": CI once saw "840920654670e119" echoed back
    # as 8.4092065467e+130, and the sweep called it another instance.
    flags = parse_flags(["--launch-id", "840920654670e119", "--budget", "16", "--port=8000"])
    assert flags == {"launch_id": "840920654670e119", "budget": 16, "port": 8000}
    assert parse_flags(["--launch-id=0123"]) == {"launch_id": "0123"}
