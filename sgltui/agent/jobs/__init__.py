"""Batch jobs in the agent: the jobs host and each job's runner child, records, target,
segments, concurrency, stall watch and view, the --choose trial's agent side, what the jobs
see of the agent (the interface and its implementation), and the OpenAI Batch API."""
