-- get (Store.Get): what is on K.
return holder()
