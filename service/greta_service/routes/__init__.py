"""One router per resource: queries, results, health (and metrics), the results page."""
