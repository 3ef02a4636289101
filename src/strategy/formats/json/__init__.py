"""JSON: the direct reader (the C decoder), its positions found when asked, and the located reader that owns the errors.

Two readers, measured (issue 46): the located reader alone loads Paddle's static_amp_merge / llama_tp2_sp strategies
in 89 / 113 µs, 0.57× / 0.58× Paddle's load_from_prototxt (158 / 194 µs), over the 0.5× bar; the C decoder with
positions found only when asked loads them in 16 / 22 µs. The located reader stays for everything the direct one
gives up on (it names file:line:col of each error, repeated keys included) and as the importers' reader of DeepSpeed
and PaddleNLP argument files, whose keys are not this schema's fields.
"""
