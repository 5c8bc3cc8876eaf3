module photon.example/go

go 1.19
