from copilot.association.cli import cli

if __name__ == "__main__":
    cli(prog_name="python -m copilot.association")
