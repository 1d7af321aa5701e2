"""Run folders: where every artifact of a run goes, and how it is read back.

    layout.py       the name of every file in a run folder (and in a benchmark's folder)
    run_records.py  the typed records those files hold (pydantic, like the plan)
    writer.py       the one writer: creates a run folder, writes records, masked, atomically
    reader.py       the one reader: run folders, their records, and which run a name means
"""
