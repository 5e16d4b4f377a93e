"""The results document: one typed model (`model`), its one writer and reader (`files`), the builder from a
run's plain data (`build`, `collect`), and every export as a function of the model (`vllm`, `csv`, `llmd`,
`aiperf`, `plot`). Pure data and files: no process, socket or UI library."""
