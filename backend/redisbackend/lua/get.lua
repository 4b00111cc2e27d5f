-- get (Store.Get): what is on K.
return lib().holder()
