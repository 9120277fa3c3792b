"""The panes of the main screen, one module each. Each pane renders a plain snapshot it is
handed by the app (`show(...)`); none of them does I/O or knows where the data came from."""
