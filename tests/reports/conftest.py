import pytest

from testing.labelled_fixtures import build, mixed_records, write_all


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """16 records of every kind (mixed_records), what each source says of them (build), and their files."""
    records = mixed_records(16)
    return records, build(records), write_all(tmp_path_factory.mktemp("labelled"), records)
