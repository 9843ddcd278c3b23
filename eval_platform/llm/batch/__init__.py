"""Batch delivery: recorded calls sent through a provider's batch API, at its discount (`deliver`, given a
`BatchJob`: `job`); the wire of each provider (`api`: OpenAI's, `providers`: Azure's and Anthropic's), submitting
(`submit`) and the state kept between runs (`state`). How a judge day uses it: `judging.batch_day`."""
