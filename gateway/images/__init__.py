"""Image helpers shared by the image transforms and the Images API: the compression pipeline
(``compress``), where images sit in requests and responses (``sites``), and the thread pool
image work runs on (``pool``). Nothing here knows about HTTP or the ORM."""
