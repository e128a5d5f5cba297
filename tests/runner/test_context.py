"""The run context: result tables are written inside the run folder only."""

import pandas as pd
import pytest

from ragtrial.runner.context import open_run


@pytest.mark.fault
@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped", "sub/table", ".."])
def test_a_table_name_cannot_leave_the_run_folder(tmp_path, name):
    ctx = open_run({"cache_path": str(tmp_path / "cache.sqlite")}, tmp_path / "out" / "run", notebook="t")
    with pytest.raises(ValueError, match="a plain file name is needed"):
        ctx.save_table(pd.DataFrame({"a": [1]}), name)
    assert sorted(p.name for p in tmp_path.rglob("*.csv")) == []
    ctx.save_table(pd.DataFrame({"a": [1]}), "fine_table")
    assert (tmp_path / "out" / "run" / "tables" / "fine_table.parquet").is_file()
