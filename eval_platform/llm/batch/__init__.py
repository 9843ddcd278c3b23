"""Batch mode: the judge's calls delivered through a provider's batch API, at its discount (`mode`); the wire of
each provider (`api`: OpenAI's, `providers`: Azure's and Anthropic's), submitting (`submit`) and the state kept
between runs (`state`)."""
