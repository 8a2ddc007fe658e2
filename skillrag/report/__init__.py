"""What a reviewer reads: the failure-space analysis (`failures`, stage `analyze`), the report
(`document`, stage `report`) with its parts (`tables`, `cases`, `provenance`, `diff`) and the
gates' Great Expectations Data Docs (`data_docs`).

Nothing is imported here, so each stage depends on exactly the modules it runs."""
