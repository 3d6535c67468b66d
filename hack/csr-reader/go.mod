module oscar.dev/hack/csr-reader

go 1.24
