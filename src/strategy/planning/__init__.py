"""From a model and a cluster to the strategies that fit: a decoder's shapes from its Hugging Face config (shapes), the
bytes a rank holds under a strategy (estimate), and the search over every axis ranked by a cost model (search)."""
