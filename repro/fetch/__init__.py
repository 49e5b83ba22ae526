"""Dependencies as files: read the host's package indexes and download pinned files by sha256.

Nothing here runs code from a package. A lockfile pin (name, version, sha256 digests) is
looked up on the indexes and find-links the host's pip configuration names (``names`` parses
file names, ``sources`` reads the configuration, ``index`` lists a project's files on one
source, ``pick`` chooses the file, ``download`` fetches it and checks its digest). Source
distributions come back as files too: building them is ``repro.backends.sourcebuild``'s job, in a
container.
"""
