"""Engine workers on other machines: the node agent (`agent`) that a Ray actor hosts on each node, and the
pure pieces both ends share (`clock`: offsets and rebasing). Only `agent`'s host and
`tui.engine.host.ray_pool` touch Ray; nothing here imports the face's side."""
