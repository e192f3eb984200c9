"""The headers of the HTML the service serves: the review pages (their own scripts and styles only)
and the self-contained reports (a calibration's, a leaderboard's: inline styles and data-URL
images, no script at all). Neither may be framed, sniffed as another type, or kept in a cache."""

from __future__ import annotations

_COMMON = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
           "X-Content-Type-Options": "nosniff"}
PAGE_HEADERS = {**_COMMON,
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; script-src 'self'; "
                                           "style-src 'self'; frame-ancestors 'none'; form-action 'self'; "
                                           "base-uri 'none'"}
REPORT_HEADERS = {**_COMMON,
                  "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                                             "frame-ancestors 'none'; form-action 'none'; base-uri 'none'"}
