"""The warehouse explains itself: every table, view and column carries a comment (DESCRIBE, any SQL client)."""

from warehouse import Warehouse


def test_every_table_view_and_column_has_a_comment(tmp_path):
    wh = Warehouse(tmp_path / "wh.duckdb")
    missing = wh.rows(
        "SELECT schema_name || '.' || table_name AS t FROM duckdb_tables() "
        "WHERE database_name = current_database() AND coalesce(comment, '') = '' "
        "UNION ALL SELECT schema_name || '.' || view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND NOT internal AND coalesce(comment, '') = '' "
        "UNION ALL SELECT schema_name || '.' || table_name || '.' || column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND coalesce(comment, '') = ''")
    assert missing == []
    [doc] = wh.rows("SELECT comment FROM duckdb_columns() WHERE table_name = 'table3' AND schema_name = 'waken' "
                    "AND column_name = 'Conf_s'")
    assert "conformity" in doc["comment"]
