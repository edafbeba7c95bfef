"""`python -m forensics` and the `kvforensics` command run the CLI.

The CLI is imported only when the command runs: a worker process that the command starts (the
log parser's) imports the command's own script again, and must not load the whole CLI."""


def main() -> None:
    from forensics.cli import main as run_cli

    run_cli()


if __name__ == "__main__":
    main()
