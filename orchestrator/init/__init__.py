"""`orch init`: a starting plan and inventory for one host (commands/init.py parses the flags,
asks and prints; the work is here).

    spec.py            InitSpec, and the checks of every value a flag or an answer gives it
    gather.py          the InitSpec from the flags, asking for what they leave out
    documents.py       the plan and the inventory, as data, then as commented YAML
    comments.py        the comments written into them
    commented_yaml.py  data plus comments -> YAML text that reads back as the data
    validation.py      both files loaded as `orch plan` would; a complaint -> the flag to blame
    staged_write.py    both files put in place together, or nothing left behind
"""
