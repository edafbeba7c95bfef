"""`python -m forensics` runs the kvforensics CLI."""

from forensics.cli import main

main()
