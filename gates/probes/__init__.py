"""Scripts copied onto a lane host and run there with the lane's interpreter: stdlib only (the
client-turn probe also uses the official `openai` client when the host has it). They are run
as `python run.py OP` with a JSON object of arguments on stdin and print one JSON line. They
are never imported by gates itself."""
