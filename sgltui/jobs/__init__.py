"""Batch jobs: OpenAI Batch files in and out, exactly-once resume, dispatch that pauses across
swaps. The agent runs each job's runner in a child process (sgltui/jobs/worker.py)."""
