"""Reading an engine trace (`train --trace FILE.json[.gz]`, Chrome trace format) for the scripts
beside this one: its events, and the step spans (track 0) in time order."""
import gzip, json


def events_of(path):
    """The trace's events; a .gz file is read through gzip."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def step_spans(events):
    """The steps' spans (complete events on track 0), in time order."""
    return sorted((e for e in events if e.get("ph") == "X" and e.get("tid") == 0),
                  key=lambda e: e["ts"])
