"""The data-access home, below the services and the selectors (docs/design.md, layout).

``sql`` holds every hand-written statement and the dialect they are written for
(it imports nothing from Django: the bench's direct ceiling sends the same
statements); ``rows`` runs them on Django's connection and makes model instances of
their rows. Raw SQL lives here only, where it buys atomicity or a request's speed.
"""
