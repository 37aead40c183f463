import sys

from corpus.flow.run import main

if __name__ == "__main__":
    sys.exit(main())
