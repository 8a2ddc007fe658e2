def test_the_timing_table_lists_each_stage_and_their_total():
    from skillrag.report.tables import timing_table

    timings = {
        "extract": {"stage": "extract", "wall_s": 2700.0, "legs": 2, "device": "cpu (2 cores, 2 torch threads)", "finished": "t1"},
        "evaluate-skill_rag": {"stage": "evaluate-skill_rag", "wall_s": 900.0, "legs": 1, "device": "cpu", "finished": "t2"},
    }
    table = timing_table(timings)
    assert "| extract | 45.0 | 2 |" in table and "| evaluate-skill_rag | 15.0 | 1 |" in table
    assert "**60.0** (1.00 h)" in table
    assert timing_table({}) is None
