"""Resolution: from what a strategy says to what a run does: the layout and topology of every axis, the pipeline
schedule, the gated settings each technique reads, the model-state memory, and `explain`'s report of it all.

Imports `schema` and `errors`, nothing of `formats`: a message built in code resolves the same as one loaded.
"""
