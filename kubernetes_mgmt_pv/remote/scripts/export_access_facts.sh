# The Storage server's resolver: "forward NAME" runs getent ahosts NAME,
# "reverse ADDRESS" getent hosts ADDRESS, each printed as a section.
while [ "$#" -gt 1 ]; do
    case $1 in
    forward) fact "forward $2" getent ahosts -- "$2" ;;
    reverse) fact "reverse $2" getent hosts -- "$2" ;;
    esac
    shift 2
done
