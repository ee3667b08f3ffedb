"""The web dashboard and Prometheus exporter (``pip install './clients/python[dashboard]'``):
``python -m rmq dashboard`` and ``python -m rmq exporter`` (cli.py). Nothing is imported
here, so ``python -m rmq stats`` works without the dashboard's dependencies."""
