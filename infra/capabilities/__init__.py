"""One construct per capability of a deployed lunaflow project."""
