"""The agent's one OpenAI endpoint (a request's `model` names the profile): its pure
policy, the moves that carry it out, and the leases it never evicts."""
