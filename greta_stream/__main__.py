from greta_stream.cli import main

main()
